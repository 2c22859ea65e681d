"""The loadable format, shared by the compiler that writes loadables and the runtime that runs them:
the schema (``loadable.proto`` and its generated ``loadable_pb2``) and the checked file container
(``loadable.format``). It sits below both so neither has to import the other."""
