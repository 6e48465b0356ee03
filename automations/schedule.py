"""Cron expressions: parsing (with Celery's own parser) and the period a firing belongs to."""

from __future__ import annotations

from datetime import datetime, timedelta

from celery.schedules import crontab

FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
LOOKBACK = timedelta(days=2)  # farther than any delivery delay we honour (expire_seconds)


class CronError(ValueError):
    """A cron expression that cannot be used; the message says why."""


def parse_cron(expression: str) -> dict[str, str]:
    """The five fields of `expression` ("*/30 9-17 * * mon-fri"), validated."""
    parts = (expression or "").split()
    if len(parts) != 5:
        raise CronError(
            f"{expression!r} is not a cron schedule: give five fields, "
            "minute hour day-of-month month day-of-week (e.g. '0 6 * * mon')"
        )
    fields = dict(zip(FIELDS, parts, strict=True))
    try:
        crontab(**fields)
    except (ValueError, KeyError) as exc:
        raise CronError(f"{expression!r} is not a valid cron schedule: {exc}") from None
    return fields


def period_of(expression: str, now: datetime) -> datetime:
    """The latest scheduled time at or before `now` (UTC, whole minutes): the period a firing at
    `now` belongs to. A late delivery still maps to the time it was scheduled for; `now` itself
    (minute) if none is found within LOOKBACK (a manual run)."""
    c = crontab(**parse_cron(expression))
    moment = now.replace(second=0, microsecond=0)
    stop = moment - LOOKBACK
    while moment > stop:
        if (
            moment.minute in c.minute
            and moment.hour in c.hour
            and moment.day in c.day_of_month
            and moment.month in c.month_of_year
            and moment.isoweekday() % 7 in c.day_of_week  # cron: 0 is Sunday
        ):
            return moment
        moment -= timedelta(minutes=1)
    return now.replace(second=0, microsecond=0)
