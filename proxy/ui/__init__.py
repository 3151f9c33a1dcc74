"""The dashboard at ``/ruyi/ui``: static files in the package (no build step, no CDN) reading the ``/ruyi/v1`` API."""
