"""The stand-in GitHub's CI: check suites, check runs and commit statuses in the shapes of
GitHub's REST reference ("Check runs", "Check suites", "Commit statuses") and of the
`check_run`, `check_suite` and `status` webhook payloads. Mixed into FakeGitHub (github_fake.py).

The App's endpoints take an installation token that may only read and write checks
(CHECKS_PERMISSIONS, one repository); anything else is answered as GitHub would and listed in
`problems`. A test makes "CI" finish on a commit with `finish_ci(...)`: the run (another App's:
GitHub Actions) is stored as GitHub would keep it, and the deliveries GitHub would send are
returned (and POSTed, signed, to `hook_url` when one is set, as for a person trying it).
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import html
import json
import subprocess
import uuid
from pathlib import Path
from urllib.parse import parse_qs

import httpx

from tests.integrations.github.github_fake_apps import now, send_html

FIXTURES = Path(__file__).parent / "fixtures"
CHECKS_PERMISSIONS = {"checks": "write"}
STATUSES_PERMISSIONS = {"statuses": "write"}
CI_APP = {"id": 15368, "slug": "github-actions", "name": "GitHub Actions",
          "owner": {"login": "github", "id": 9919, "type": "Organization"}}  # fmt: skip
RUN_FIELDS = {"name", "head_sha", "details_url", "external_id", "status", "started_at",
              "conclusion", "completed_at", "output", "actions"}  # fmt: skip
CONCLUSIONS = {"action_required", "cancelled", "failure", "neutral", "success", "skipped",
               "stale", "timed_out"}  # fmt: skip
STATES = {"error", "failure", "pending", "success"}


class ChecksMixin:
    """Check runs, check suites and statuses, kept per repository (by full name)."""

    def init_checks(self) -> None:
        self.check_runs: dict[int, dict] = {}  # id -> stored run (with "repo" and "annotations")
        self.check_suites: dict[int, dict] = {}
        self.statuses: list[dict] = []
        self.hook_url = ""  # where finish_ci POSTs its deliveries, signed with hook_secret
        self.hook_secret = ""
        self._check_ids = iter(range(4_000_000_001, 5_000_000_000))

    # -- the test's controls -------------------------------------------------------------------
    def finish_ci(
        self, full_name: str, sha: str, *, name: str = "test", conclusion: str = "failure",
        summary: str = "", text: str = "", annotations: tuple[dict, ...] = (),
        kind: str = "check_run", deliver_to: tuple[str, str] | None = None,
    ) -> list[tuple[str, dict]]:  # fmt: skip
        """CI (GitHub Actions, or a CI reporting commit statuses when `kind` is "status")
        finishes on `sha` with `conclusion` ("success", "failure"; a status's "error"),
        its output's `summary` and `text` (the log). Returns the (event, payload) deliveries
        GitHub sends for it, in order (also POSTed, signed, to `deliver_to`'s (URL, secret) or
        else `hook_url` when one is set)."""
        repo = self.repo(full_name)
        if kind == "status":
            status = self._add_status(repo, sha, state=conclusion, context=name,
                                      description=summary, creator_app=True)  # fmt: skip
            return self._send([("status", self._status_payload(repo, status))], deliver_to)
        suite = self._suite_for(repo, sha, CI_APP)
        run = self._new_run(
            repo, suite, name=name, head_sha=sha, app=CI_APP, status="in_progress",
            details_url=f"https://github.com/{repo.full_name}/actions/runs/{suite['id']}",
        )  # fmt: skip
        created = self._run_payload(repo, run, "created")
        run.update(
            status="completed", conclusion=conclusion, completed_at=now(),
            output={"title": f"{name} {conclusion}", "summary": summary, "text": text},
            annotations=[dict(a) for a in annotations],
        )  # fmt: skip
        completed = self._run_payload(repo, run, "completed")
        suite.update(status="completed", conclusion=conclusion, updated_at=now())
        return self._send([("check_run", created), ("check_run", completed),
                           ("check_suite", self._suite_payload(repo, suite))],
                          deliver_to)  # fmt: skip

    def runs_on(self, full_name: str, sha: str, name: str | None = None) -> list[dict]:
        """The check runs stored on `sha` (as the REST API shows them)."""
        repo = self.repo(full_name)
        return [self._run_json(repo, r, self.url) for r in self.check_runs.values()
                if r["repo"] == repo.full_name and r["head_sha"] == sha
                and (name is None or r["name"] == name)]  # fmt: skip

    # -- the shapes ----------------------------------------------------------------------------
    def _suite_for(self, repo, sha: str, app: dict) -> dict:
        for suite in self.check_suites.values():
            if suite["repo"] == repo.full_name and suite["head_sha"] == sha and suite["app"] == app:
                return suite
        suite_id = next(self._check_ids)
        suite = {"id": suite_id, "repo": repo.full_name, "head_sha": sha, "app": app,
                 "head_branch": _branch_of(repo, sha), "status": "queued",
                 "conclusion": None, "created_at": now(), "updated_at": now()}  # fmt: skip
        self.check_suites[suite_id] = suite
        return suite

    def _new_run(self, repo, suite: dict, **fields) -> dict:
        run = {"id": next(self._check_ids), "repo": repo.full_name, "suite": suite["id"],
               "external_id": "", "details_url": None, "status": "queued", "conclusion": None,
               "started_at": now(), "completed_at": None,
               "output": {"title": None, "summary": None, "text": None}, "annotations": [],
               **fields}  # fmt: skip
        with self.lock:
            self.check_runs[run["id"]] = run
        return run

    def _pulls_of(self, repo, sha: str, api_root: str) -> list[dict]:
        """The open PRs whose head is `sha`, as a check run or suite lists them."""
        found = []
        for pull in repo.pulls:
            head = repo.head(pull["head"]["ref"]) or pull["head"]["sha"]
            if pull["state"] == "open" and head == sha:
                repo_ref = {"id": repo.id, "url": f"{api_root}/repos/{repo.full_name}",
                            "name": repo.full_name.split("/")[1]}  # fmt: skip
                found.append({
                    "url": f"{api_root}/repos/{repo.full_name}/pulls/{pull['number']}",
                    "id": pull["id"], "number": pull["number"],
                    "head": {"ref": pull["head"]["ref"], "sha": head, "repo": repo_ref},
                    "base": {"ref": pull["base"]["ref"], "sha": pull["base"]["sha"],
                             "repo": repo_ref},
                })  # fmt: skip
        return found

    def _run_json(self, repo, run: dict, api_root: str) -> dict:
        base = f"{api_root}/repos/{repo.full_name}"
        output = run["output"] or {}
        return {
            "id": run["id"], "node_id": f"CR_{run['id']}", "head_sha": run["head_sha"],
            "external_id": run["external_id"] or "", "url": f"{base}/check-runs/{run['id']}",
            "html_url": f"https://github.com/{repo.full_name}/runs/{run['id']}",
            "details_url": run["details_url"], "status": run["status"],
            "conclusion": run["conclusion"], "started_at": run["started_at"],
            "completed_at": run["completed_at"],
            "output": {"title": output.get("title"), "summary": output.get("summary"),
                       "text": output.get("text"), "annotations_count": len(run["annotations"]),
                       "annotations_url": f"{base}/check-runs/{run['id']}/annotations"},
            "name": run["name"], "check_suite": {"id": run["suite"]}, "app": run["app"],
            "pull_requests": self._pulls_of(repo, run["head_sha"], api_root),
        }  # fmt: skip

    def _suite_json(self, repo, suite: dict, api_root: str) -> dict:
        base = f"{api_root}/repos/{repo.full_name}"
        runs = [r for r in self.check_runs.values() if r["suite"] == suite["id"]]
        return {
            "id": suite["id"], "node_id": f"CS_{suite['id']}", "head_branch": suite["head_branch"],
            "head_sha": suite["head_sha"], "status": suite["status"],
            "conclusion": suite["conclusion"], "url": f"{base}/check-suites/{suite['id']}",
            "before": None, "after": suite["head_sha"],
            "pull_requests": self._pulls_of(repo, suite["head_sha"], api_root),
            "app": suite["app"], "created_at": suite["created_at"],
            "updated_at": suite["updated_at"], "latest_check_runs_count": len(runs),
            "check_runs_url": f"{base}/check-suites/{suite['id']}/check-runs",
            "head_commit": {"id": suite["head_sha"], "message": "", "timestamp": now()},
        }  # fmt: skip

    def _envelope(self, repo, **data) -> dict:
        template = json.loads((FIXTURES / "pull_request_opened.json").read_text())
        repository = template["repository"]
        repository.update(full_name=repo.full_name, name=repo.full_name.split("/")[1],
                          id=repo.id)  # fmt: skip
        return {**data, "repository": repository, "sender": copy.deepcopy(template["sender"]),
                "installation": {"id": repo.installation}}  # fmt: skip

    def _run_payload(self, repo, run: dict, action: str) -> dict:
        data = self._run_json(repo, run, "https://api.github.com")
        data["check_suite"] = self._suite_json(
            repo, self.check_suites[run["suite"]], "https://api.github.com"
        )
        return self._envelope(repo, action=action, check_run=data)

    def _suite_payload(self, repo, suite: dict) -> dict:
        return self._envelope(
            repo, action="completed",
            check_suite=self._suite_json(repo, suite, "https://api.github.com"),
        )  # fmt: skip

    def _add_status(self, repo, sha: str, *, state: str, context: str, description: str = "",
                    target_url: str | None = None, creator_app: bool = False) -> dict:  # fmt: skip
        status = {
            "id": next(self._check_ids), "repo": repo.full_name, "sha": sha, "state": state,
            "context": context or "default", "description": description or None,
            "target_url": target_url or f"https://ci.example.com/{repo.full_name}/{sha[:12]}",
            "created_at": now(), "updated_at": now(),
            "creator": {"login": "ci-bot" if creator_app else "Codertocat", "id": 9919,
                        "type": "Bot" if creator_app else "User"},
        }  # fmt: skip
        with self.lock:
            self.statuses.append(status)
        return status

    def _status_json(self, repo, status: dict, api_root: str) -> dict:
        return {
            "url": f"{api_root}/repos/{repo.full_name}/statuses/{status['sha']}",
            "id": status["id"], "node_id": f"SC_{status['id']}", "state": status["state"],
            "description": status["description"], "target_url": status["target_url"],
            "context": status["context"], "created_at": status["created_at"],
            "updated_at": status["updated_at"], "creator": status["creator"],
        }  # fmt: skip

    def _status_payload(self, repo, status: dict) -> dict:
        branches = [
            {"name": p["head"]["ref"], "commit": {"sha": status["sha"]}, "protected": False}
            for p in repo.pulls if repo.head(p["head"]["ref"]) == status["sha"]
        ]  # fmt: skip
        return self._envelope(
            repo, id=status["id"], sha=status["sha"], name=repo.full_name,
            target_url=status["target_url"], context=status["context"],
            description=status["description"], state=status["state"],
            commit={"sha": status["sha"], "node_id": "", "commit": {"message": ""}},
            branches=branches, created_at=status["created_at"],
            updated_at=status["updated_at"],
        )  # fmt: skip

    def _send(
        self, deliveries: list[tuple[str, dict]], deliver_to: tuple[str, str] | None = None
    ) -> list[tuple[str, dict]]:
        """POST each delivery, signed, to `deliver_to` or `hook_url` when one is set (the
        stand-in run by a person); tests post the returned list through their own client."""
        url, secret = deliver_to or (self.hook_url, self.hook_secret)
        if url:
            for event, payload in deliveries:
                body = json.dumps(payload).encode()
                signature = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
                httpx.post(url, content=body, timeout=30, headers={
                    "Content-Type": "application/json", "X-GitHub-Event": event,
                    "X-GitHub-Delivery": str(uuid.uuid4()),
                    "X-Hub-Signature-256": f"sha256={signature}",
                    "User-Agent": "GitHub-Hookshot/stand-in",
                })  # fmt: skip
        return deliveries

    # -- a person's CI button (the stand-in run by hand) -----------------------------------------
    def ci_page(self, req, match, query, body: bytes) -> None:
        """`/_stand-in/ci/OWNER/NAME`: GET a form, POST it to make CI finish on a branch's head
        (or a commit) with a conclusion and a log; the deliveries go to the webhook of the App
        installed on the repository, signed with its secret."""
        full_name = f"{match['owner']}/{match['repo']}"
        repo = self.repos.get(full_name.lower())
        if repo is None:
            return send_html(req, 404, "Not Found", "<p>No such repository here.</p>")
        if req.command == "GET":
            asked = (
                ("ref", "Branch or commit", ""),
                ("name", "Check", "test"),
                ("conclusion", "Conclusion", "failure"),
                ("summary", "Summary", "1 failed"),
            )
            fields = "".join(
                f"<p><label>{label} <input name='{name}' value='{html.escape(value)}'></label></p>"
                for name, label, value in asked
            )  # fmt: skip
            form = (f"<form method='post'>{fields}<p><label>Log <textarea name='text'>"
                    "</textarea></label></p><button>Finish CI</button></form>")  # fmt: skip
            return send_html(req, 200, f"Finish CI on {full_name}", form)
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        ref = form.get("ref", "")
        sha = ref if _git_has(repo, ref) and len(ref) == 40 else repo.head(ref or "main")
        app = self.apps.get(self.app_of_installation(repo.installation) or -1)
        hook = (app.manifest.get("hook_attributes") or {}).get("url") if app else None
        if not sha or not hook:
            return send_html(req, 422, "Cannot finish CI",
                             "<p>Give a branch or commit of the repository, and install an App "
                             "with a webhook on it first.</p>")  # fmt: skip
        sent = self.finish_ci(
            full_name, sha, name=form.get("name") or "test",
            conclusion=form.get("conclusion") or "failure", summary=form.get("summary", ""),
            text=form.get("text", ""), deliver_to=(hook, app.webhook_secret),
        )  # fmt: skip
        items = "".join(f"<li>{html.escape(event)}</li>" for event, _ in sent)
        return send_html(req, 200, f"CI finished on {sha[:12]}", f"<ul>{items}</ul>")

    # -- REST endpoints ------------------------------------------------------------------------
    def create_check_run(self, req, match, query, body):
        repo, error, app = self._checks_request(req, match)
        if error:
            return error
        body = body or {}
        unknown = set(body) - RUN_FIELDS
        if unknown or not body.get("name") or not body.get("head_sha"):
            self.problem(f"POST check-runs with {sorted(body)}")
            return 422, {"message": "Invalid request.", "documentation_url":
                         "https://docs.github.com/rest/checks/runs#create-a-check-run"}  # fmt: skip
        if problem := self._run_problem(body):
            return problem
        if not _git_has(repo, body["head_sha"]):
            return 422, {"message": "No commit found for SHA: " + body["head_sha"]}
        suite = self._suite_for(repo, body["head_sha"], app)
        run = self._new_run(repo, suite, app=app, **_run_fields(body))
        if run["conclusion"]:
            run.update(status="completed", completed_at=run["completed_at"] or now())
        return 201, self._run_json(repo, run, req.api_root)

    def update_check_run(self, req, match, query, body):
        repo, error, app = self._checks_request(req, match)
        if error:
            return error
        run = self.check_runs.get(int(match["id"]))
        if run is None or run["repo"] != repo.full_name:
            return 404, {"message": "Not Found"}
        if run["app"]["id"] != app["id"]:
            self.problem(f"PATCH check-runs/{run['id']}: another App's check run")
            return 403, {"message": f"Invalid app_id `{app['id']}` - check run can only be "
                                    "modified by the GitHub App that created it."}  # fmt: skip
        body = body or {}
        if set(body) - RUN_FIELDS:
            self.problem(f"PATCH check-runs with {sorted(body)}")
            return 422, {"message": "Invalid request."}
        if problem := self._run_problem(body):
            return problem
        run.update(_run_fields(body))
        if run["conclusion"]:
            run.update(status="completed", completed_at=run["completed_at"] or now())
        return 200, self._run_json(repo, run, req.api_root)

    def get_check_run(self, req, match, query, body):
        repo, error, _ = self._checks_request(req, match)
        if error:
            return error
        run = self.check_runs.get(int(match["id"]))
        if run is None or run["repo"] != repo.full_name:
            return 404, {"message": "Not Found"}
        return 200, self._run_json(repo, run, req.api_root)

    def check_run_annotations(self, req, match, query, body):
        repo, error, _ = self._checks_request(req, match)
        if error:
            return error
        run = self.check_runs.get(int(match["id"]))
        if run is None or run["repo"] != repo.full_name:
            return 404, {"message": "Not Found"}
        blob = f"https://github.com/{repo.full_name}/blob/{run['head_sha']}"
        return 200, [
            {"path": a.get("path", ""), "blob_href": f"{blob}/{a.get('path', '')}",
             "start_line": a.get("start_line", 1), "end_line": a.get("end_line", 1),
             "start_column": None, "end_column": None,
             "annotation_level": a.get("annotation_level", "failure"),
             "title": a.get("title", ""), "message": a.get("message", ""),
             "raw_details": a.get("raw_details", "")}
            for a in run["annotations"]
        ]  # fmt: skip

    def list_check_runs(self, req, match, query, body):
        repo, error, _ = self._checks_request(req, match)
        if error:
            return error
        ref = match["ref"]
        sha = ref if _git_has(repo, ref) and len(ref) == 40 else repo.head(ref)
        name = (query.get("check_name") or [None])[0]
        status = (query.get("status") or [None])[0]
        runs = [r for r in self.check_runs.values() if r["repo"] == repo.full_name
                and r["head_sha"] == sha and (name is None or r["name"] == name)
                and (status is None or r["status"] == status)]  # fmt: skip
        if (query.get("filter") or ["latest"])[0] == "latest":
            latest: dict[tuple, dict] = {}
            for run in runs:  # the newest run of each name in each suite's App
                latest[(run["name"], run["app"]["id"])] = run
            runs = list(latest.values())
        return 200, {
            "total_count": len(runs),
            "check_runs": [self._run_json(repo, r, req.api_root) for r in runs],
        }

    def create_status(self, req, match, query, body):
        repo = self.repos.get(f"{match['owner']}/{match['repo']}".lower())
        if repo is None:
            return 404, {"message": "Not Found"}
        status, error, kind = self._installation_token(req, repo, wanted=STATUSES_PERMISSIONS)
        if status != 200:
            return status, error
        body = body or {}
        if body.get("state") not in STATES or set(body) - {
            "state",
            "target_url",
            "description",
            "context",
        }:
            self.problem(f"POST statuses with {body}")
            return 422, {"message": "Validation Failed"}
        if not _git_has(repo, match["sha"]):
            return 422, {"message": "No commit found for SHA: " + match["sha"]}
        stored = self._add_status(
            repo, match["sha"], state=body["state"], context=body.get("context", "default"),
            description=body.get("description", ""), target_url=body.get("target_url"),
        )  # fmt: skip
        return 201, self._status_json(repo, stored, req.api_root)

    # -- checks -----------------------------------------------------------------------------
    def _checks_request(self, req, match):
        """(repo, error, the App) for a request that needs a checks token for the repository."""
        repo = self.repos.get(f"{match['owner']}/{match['repo']}".lower())
        if repo is None:
            return None, (404, {"message": "Not Found"}), None
        status, error, kind = self._installation_token(req, repo, wanted=CHECKS_PERMISSIONS)
        if status != 200:
            return None, (status, error), None
        if kind != "app":
            self.problem(f"{req.command} {req.path} with a person's token, not the App's")
            return None, (403, {"message": "Resource not accessible by integration"}), None
        token = self.tokens[req.headers["Authorization"].split(" ")[-1]]
        app_id = self.app_of_installation(token.installation)
        app = self.apps.get(app_id)
        slug = app.slug if app is not None else "inspect-web"
        return repo, None, {"id": app_id, "slug": slug, "name": slug,
                            "owner": {"login": repo.full_name.split("/")[0]}}  # fmt: skip

    def _run_problem(self, body: dict):
        status, conclusion = body.get("status"), body.get("conclusion")
        if status is not None and status not in {"queued", "in_progress", "completed"}:
            self.problem(f"a check run with status {status!r}")
            return 422, {"message": "Invalid request.\n\n" + f"{status!r} is not a status."}
        if conclusion is not None and conclusion not in CONCLUSIONS:
            self.problem(f"a check run with conclusion {conclusion!r}")
            return 422, {"message": f"Invalid request.\n\n{conclusion!r} is not a conclusion."}
        if status == "completed" and not conclusion:
            self.problem("a completed check run without a conclusion")
            return 422, {"message": "Invalid request.\n\nNo conclusion given."}
        output = body.get("output")
        if output is not None and (not isinstance(output, dict) or not output.get("title")
                                   or not output.get("summary")):  # fmt: skip
            self.problem(f"a check run output without title or summary: {output!r}")
            return 422, {"message": "Invalid request.\n\nOutput needs title and summary."}
        for key in ("summary", "text"):
            if output and len(output.get(key) or "") > 65_535:
                self.problem(f"a check run output {key} over 65535 characters")
                return 422, {"message": f"Invalid request.\n\n{key} is too long."}
        return None


def _branch_of(repo, sha: str) -> str | None:
    """The branch a commit was pushed to, as its check suite names it: the branch whose tip it
    is, else a pull request's branch holding it (pushed to it, then built on)."""
    refs = _git_lines(repo, "for-each-ref", "--format=%(refname:short) %(objectname)",
                      "refs/heads/")  # fmt: skip
    tips = [line.split()[0] for line in refs if line.strip() and line.split()[-1] == sha]
    if tips:
        return tips[0]
    holding = set(_git_lines(repo, "for-each-ref", "--format=%(refname:short)", "--contains",
                             sha, "refs/heads/"))  # fmt: skip
    return next((p["head"]["ref"] for p in repo.pulls if p["head"]["ref"] in holding), None)


def _git_lines(repo, *args: str) -> list[str]:
    found = subprocess.run(
        ["git", *args], cwd=repo.path, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "GIT_CONFIG_NOSYSTEM": "1"},
    )  # fmt: skip
    return found.stdout.split("\n") if found.returncode == 0 else []


def _run_fields(body: dict) -> dict:
    fields = {k: v for k, v in body.items() if k in RUN_FIELDS and k not in {"output", "actions"}}
    if "output" in body:
        fields["output"] = dict(body["output"])
    return fields


def _git_has(repo, sha: str) -> bool:
    """Whether the repository holds commit `sha`."""
    return _git_lines(repo, "cat-file", "-t", sha)[:1] == ["commit"]


CHECK_WEB_ROUTES = [
    (r"/_stand-in/ci/(?P<owner>[^/]+)/(?P<repo>[^/]+)", ChecksMixin.ci_page),
]
CHECK_ROUTES = [
    ("POST", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/check-runs", ChecksMixin.create_check_run),
    ("PATCH", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/check-runs/(?P<id>\d+)",
     ChecksMixin.update_check_run),
    ("GET", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/check-runs/(?P<id>\d+)",
     ChecksMixin.get_check_run),
    ("GET", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/check-runs/(?P<id>\d+)/annotations",
     ChecksMixin.check_run_annotations),
    ("GET", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/commits/(?P<ref>[^/]+)/check-runs",
     ChecksMixin.list_check_runs),
    ("POST", r"/repos/(?P<owner>[^/]+)/(?P<repo>[^/]+)/statuses/(?P<sha>[0-9a-f]{40})",
     ChecksMixin.create_status),
]  # fmt: skip
