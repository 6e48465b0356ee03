"""The metrics data seeder: fill the database with realistic sessions, events, pull requests,
reviews and this month's model requests, fast.

For the benchmark, for trying the Metrics page, and for the tests (`manage.py inspect metrics
seed`, metrics/cli.py). Deterministic for a given `seed`; names start with `prefix`
(repositories `<prefix>-repo-N`, users `<prefix>-user-N`), so that a seed never touches real
rows and a second prefix can sit beside the first.

Bulk inserts in batches (`bulk_create`); the event log is written with COPY on PostgreSQL.
"""

from __future__ import annotations

import json
import math
import random
import time
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.db import connection, transaction
from django.utils import timezone

from accounts.models import Membership, Role
from gateway.budgets import period_start
from gateway.models import ModelRequest
from sessions.models import Event, Prompt, PullRequest, ReviewEvent, Session, State
from snapshots.models import Repository

BATCH = 5000
EVENT_KINDS = [("output", 14), ("tool_call", 2), ("tool_result", 2), ("agent_message", 1),
               ("usage", 1)]  # fmt: skip
# Seeded people cannot log in (the benchmark makes its own manager).
UNUSABLE = make_password(None)
ROLE_MIX = [Role.ENGINEER] * 6 + [Role.REVIEWER] * 2 + [Role.MANAGER, Role.ADMIN]


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0, sigma))


def seed_metrics_data(
    *,
    sessions: int,
    events: int,
    prs: int,
    repositories: int = 12,
    users: int = 120,
    days: int = 180,
    seed: int = 7,
    prefix: str = "seed",
    now: datetime | None = None,
) -> dict:
    """Insert a realistic data set; returns what was made. Raises ValueError when the sizes
    do not fit together or rows with `prefix` exist already (choose another prefix)."""
    if min(sessions, events, prs, days) < 0 or repositories < 1 or users < 1:
        raise ValueError("sizes must be positive, with at least one repository and one user")
    if prs > sessions:
        raise ValueError(f"--prs ({prs}) cannot exceed --sessions ({sessions}): one PR per session")
    if Repository.objects.filter(name__startswith=f"{prefix}-repo-").exists():
        raise ValueError(
            f"repositories named {prefix}-repo-* exist already; seed with another --prefix"
        )
    rng = random.Random(seed)
    now = now or timezone.now()
    started = time.monotonic()
    with transaction.atomic():
        repos, weights, people, members = _people(rng, prefix, repositories, users)
        made = _sessions(rng, now, days, sessions, events, repos, weights, members)
        pr_count, review_count = _pull_requests(rng, now, made, prs, people)
        prompt_count = _prompts(rng, now, made, members)
        request_count = _model_requests(rng, now, made)
    event_count = _events(rng, made)
    return {
        "repositories": len(repos),
        "users": len(people),
        "sessions": len(made),
        "events": event_count,
        "prs": pr_count,
        "reviews": review_count,
        "prompts": prompt_count,
        "model_requests": request_count,
        "seconds": round(time.monotonic() - started, 1),
    }


def _people(rng, prefix, repositories, users):
    user_model = get_user_model()
    repos = Repository.objects.bulk_create(
        [Repository(name=f"{prefix}-repo-{i}", url=f"/srv/git/{prefix}-{i}.git")
         for i in range(repositories)]
    )  # fmt: skip
    # Zipf-like: a few busy repositories, a long tail.
    weights = [1 / (i + 1) ** 0.8 for i in range(repositories)]
    people = user_model.objects.bulk_create(
        [user_model(username=f"{prefix}-user-{i}", password=UNUSABLE) for i in range(users)],
        batch_size=BATCH,
    )
    memberships, members = [], {r.pk: [] for r in repos}
    for n, person in enumerate(people):
        for repo in rng.sample(repos, k=min(len(repos), 1 + n % 3)):
            memberships.append(Membership(user=person, repository=repo, role=rng.choice(ROLE_MIX)))
            members[repo.pk].append(person)
    for repo in repos:  # every repository has someone to start its sessions
        if not members[repo.pk]:
            memberships.append(Membership(user=people[0], repository=repo, role=Role.ENGINEER))
            members[repo.pk].append(people[0])
    Membership.objects.bulk_create(memberships, batch_size=BATCH)
    return repos, weights, people, members


def _session_time(rng, now, days) -> datetime:
    while True:
        moment = now - timedelta(seconds=rng.random() * days * 86400)
        # Weekends see a third of a weekday's sessions.
        if moment.weekday() < 5 or rng.random() < 0.33:
            return moment


def _sessions(rng, now, days, count, events, repos, weights, members) -> list[Session]:
    # Events per session: skewed (a few long sessions), summing to exactly `events`.
    shares = [rng.expovariate(1) for _ in range(count)]
    scale = events / sum(shares) if shares else 0
    per_session = [int(s * scale) for s in shares]
    for i in range(events - sum(per_session)):
        per_session[i % count] += 1
    rows = []
    for i in range(count):
        repo = rng.choices(repos, weights)[0]
        # The newest few sessions started in the last minutes: "humans prompting now".
        created = (
            now - timedelta(seconds=rng.random() * 240) if i < 8 else _session_time(rng, now, days)
        )
        verify = rng.random()
        rows.append(
            Session(
                repository=repo,
                creator=rng.choice(members[repo.pk]),
                title=f"seeded task {i}",
                branch=f"inspect/{i}-seeded",
                state=State.IDLE,
                last_seq=per_session[i],
                created_at=created,
                cost_usd=round(_lognormal(rng, 0.6, 0.9), 4),
                sandbox_seconds=round(_lognormal(rng, 420, 0.8), 1),
                retries=min(int(rng.expovariate(2.5)), 6),
                verify_ok=True if verify < 0.78 else (False if verify < 0.95 else None),
                start_ms=round(_lognormal(rng, 650, 0.5), 1),
                snapshot_age_s=round(rng.random() * 1800, 1),
            )
        )
    return Session.objects.bulk_create(rows, batch_size=BATCH)


def _pull_requests(rng, now, sessions, count, people):
    chosen = rng.sample(sessions, k=count)
    prs = []
    for session in chosen:
        opened = session.created_at + timedelta(minutes=_lognormal(rng, 25, 0.6))
        age_h = (now - opened).total_seconds() / 3600
        first_review = opened + timedelta(hours=_lognormal(rng, 2.5, 1.0))
        merged_at = first_review + timedelta(hours=_lognormal(rng, 3, 1.0))
        roll = rng.random()
        if merged_at < now and roll < 0.62:
            state = PullRequest.State.MERGED
        elif roll < 0.80 and age_h > 24:
            state = PullRequest.State.CLOSED
        else:
            state = PullRequest.State.OPEN
        reviewed = first_review < now and (state != "open" or rng.random() < 0.5)
        merged = state == PullRequest.State.MERGED
        reverted = merged and rng.random() < 0.03
        rounds = 1 + min(int(rng.expovariate(1.2)), 4) if reviewed else 0
        prs.append(
            PullRequest(
                session=session,
                repository_id=session.repository_id,
                branch=session.branch,
                base="main",
                title=session.title,
                state=state,
                author_id=session.creator_id,
                additions=int(_lognormal(rng, 60, 1.1)),
                deletions=int(_lognormal(rng, 20, 1.1)),
                changed_files=1 + int(rng.expovariate(0.3)),
                review_rounds=rounds,
                created_at=opened,
                first_review_at=first_review if reviewed else None,
                merged_at=merged_at if merged else None,
                closed_at=(merged_at if merged else opened + timedelta(days=1))
                if state != "open"
                else None,
                reverted_at=merged_at + timedelta(days=rng.uniform(0.5, 10)) if reverted else None,
            )
        )
        session.state = {"merged": State.MERGED, "closed": State.CLOSED}.get(state, State.PR_OPEN)
    made = PullRequest.objects.bulk_create(prs, batch_size=BATCH)
    Session.objects.bulk_update(chosen, ["state"], batch_size=BATCH)
    reviews = []
    for pr in made:
        if pr.first_review_at is None:
            continue
        at = pr.first_review_at
        for r in range(pr.review_rounds):
            last = r == pr.review_rounds - 1
            kind = (
                ReviewEvent.Kind.APPROVED
                if last and pr.state == "merged"
                else rng.choice([ReviewEvent.Kind.CHANGES_REQUESTED, ReviewEvent.Kind.COMMENTED])
            )
            reviewer = rng.choice(people)
            # Code-host reviews carry no timing (0: the metrics count a fixed effort) ...
            reviews.append(ReviewEvent(pull_request=pr, reviewer=reviewer, kind=kind,
                                       reviewer_login=reviewer.username,
                                       created_at=at))  # fmt: skip
            # ... time on the dashboard's review page is measured.
            if rng.random() < 0.6:
                reviews.append(ReviewEvent(
                    pull_request=pr, reviewer=reviewer, kind=ReviewEvent.Kind.VIEWED,
                    reviewer_login=reviewer.username, created_at=at,
                    seconds=int(_lognormal(rng, 240, 0.8)),
                ))  # fmt: skip
            at += timedelta(hours=_lognormal(rng, 1.5, 0.8))
    ReviewEvent.objects.bulk_create(reviews, batch_size=BATCH)
    return len(made), len(reviews)


def _prompts(rng, now, sessions, members) -> int:
    rows = [Prompt(session=s, author_id=s.creator_id, text=s.title, order=1, state="done",
                   created_at=s.created_at) for s in sessions]  # fmt: skip
    Prompt.objects.bulk_create(rows, batch_size=BATCH)
    return len(rows)


# Which runtime a seeded session ran, and the models it asked for.
RUNTIME_MODELS = {
    "claude_code": ["claude-sonnet-4-5", "claude-haiku-4-5"],
    "codex": ["gpt-5-codex", "gpt-4.1"],
    "opencode": ["claude-sonnet-4-5", "gpt-4.1"],
    "builtin": ["claude-sonnet-4-5"],
}


def _model_requests(rng, now, sessions) -> int:
    """The gateway's records of this month's sessions (the Metrics page's spend): each
    session's cost split over a few requests, so the two add up."""
    since = period_start("month", now)
    rows = []
    for session in sessions:
        if session.created_at < since:
            continue
        runtime = rng.choices(list(RUNTIME_MODELS), [4, 3, 2, 1])[0]
        parts = [rng.random() + 0.1 for _ in range(rng.randint(1, 4))]
        for i, part in enumerate(parts):
            usd = session.cost_usd * part / sum(parts)
            rows.append(ModelRequest(
                session=session, user_id=session.creator_id, repository_id=session.repository_id,
                runtime=runtime, provider="openai" if runtime == "codex" else "anthropic",
                endpoint="responses" if runtime == "codex" else "messages",
                model=rng.choice(RUNTIME_MODELS[runtime]), stream=True, status=200,
                outcome=ModelRequest.Outcome.OK, input_tokens=int(usd * 200_000),
                output_tokens=int(usd * 20_000), cost_usd=round(usd, 6),
                latency_ms=round(_lognormal(rng, 4000, 0.6), 1), request_sha256="0" * 64,
                response_sha256="0" * 64, created_at=session.created_at + timedelta(seconds=20 * i),
            ))  # fmt: skip
    ModelRequest.objects.bulk_create(rows, batch_size=BATCH)
    return len(rows)


def _event_rows(rng, sessions):
    kinds = [k for k, w in EVENT_KINDS for _ in range(w)]
    for session in sessions:
        at = session.created_at
        for seq in range(1, session.last_seq + 1):
            kind = "prompt" if seq == 1 else rng.choice(kinds)
            at += timedelta(milliseconds=rng.randint(50, 4000))
            yield session.pk, seq, kind, {"text": f"seeded {kind} {seq}", "turn": 1}, at


def _events(rng, sessions) -> int:
    rows = _event_rows(rng, sessions)
    count = 0
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(Event._meta.db_table)
        with transaction.atomic(), connection.cursor() as cursor:
            copy_sql = f"COPY {table} (session_id, seq, kind, payload, created_at) FROM STDIN"
            with cursor.cursor.copy(copy_sql) as copy:
                for session_id, seq, kind, payload, at in rows:
                    copy.write_row((session_id, seq, kind, json.dumps(payload), at))
                    count += 1
        return count
    batch: list[Event] = []
    with transaction.atomic():
        for session_id, seq, kind, payload, _at in rows:
            # (created_at is auto_now_add: the ORM stamps it; COPY above keeps the spread.)
            batch.append(Event(session_id=session_id, seq=seq, kind=kind, payload=payload))
            count += 1
            if len(batch) >= BATCH:
                Event.objects.bulk_create(batch)
                batch = []
        Event.objects.bulk_create(batch)
    return count
