"""The verification library: what suites and unit tests share, and nothing that runs by itself.

The independent reference math (``reference``), the model zoo (``zoo``), the hypothesis strategies that
draw legal register programs (``strategies``), onnxruntime as the float reference (``float_reference``) and
golden's verdict in each RTL harness's language (``golden_verdict``). Tests may import it; it imports no
suite, runner or test (an import-linter contract in pyproject.toml), so a suite is never a library.
"""
