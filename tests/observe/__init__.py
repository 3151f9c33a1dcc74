"""Tests of proxy/observe: /metrics, the audit file, ruyi report."""
