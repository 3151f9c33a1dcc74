"""What Ruyi shows about itself: Prometheus metrics, the audit file, the health report (`ruyi report`); imports any proxy room but flow and replay."""
