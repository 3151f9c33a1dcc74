"""Tests of proxy/layout."""
