"""HAL observed: its Prometheus metric families, which every room and app counts into,
and the scrape-time sources that read the database (the `/metrics` view serves both)."""
