"""The metrics (top floor): review metrics of the sessions' work, the Metrics page and its CSV,
the review-time write, the data seeder and its `inspect metrics` command.

figures (what a report adds up), scope (which repositories and dates), queries (the figures
computed over the sessions: the reference), models, rollups, rollup_read and sketch (the page's
figures from per-day rollups, docs/metrics.md), tasks, presentation (cards, tables, CSV,
charts), review_time (the review page's ping), seed and cli (the seeder and its command), views
and urls (the page and the ping's route).
"""
