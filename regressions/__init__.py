"""Regression suites: conformance, end-to-end, RTL, fuzz, and independent reference math."""
