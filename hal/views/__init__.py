"""Console views: pages and JSON API endpoints."""
