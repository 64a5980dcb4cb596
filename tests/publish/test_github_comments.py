"""The sticky comment against the local GitHub server: whose it is, what GitHub refused, and
what its heading and commit say (``lkeval report`` as the Action runs it)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from report_fixtures import msg, results_of, run_results, scenario, verdicts_for
from test_publish_github import PR, REPO, Actions, actions, mine, passing

from lkeval.publish.github.api import GitHubApi, token_kind
from lkeval.publish.github.comments import ACTIONS_BOT, find_comment, token_identity
from lkeval.results.model import Attempt, RunResults

__all__ = ["actions"]  # the fixture, shared with test_publish_github

PAT = "ghp_personal_token_of_octocat"


def big_failing_run() -> RunResults:
    """A run whose full report is long (transcripts) while its compact one is short."""
    transcript = tuple(msg(1, "user", "word " * 60) for _ in range(4))
    failing = [
        scenario(
            f"s{i}",
            "failed",
            reason="the judge disagreed",
            attempts=(Attempt("failed", transcript=transcript, verdicts=verdicts_for("failed")),),
        )
        for i in range(4)
    ]
    return results_of(*failing)


def warnings(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("::warning::")]


# --- whose comment it is ---------------------------------------------------------------------


def test_a_marker_comment_by_someone_else_is_left_alone(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    gh = actions.gh
    gh.add_comments(REPO, PR, ["<!-- lk-eval:default -->\n## lk-eval: ✅ gate passed"], "mallory")
    forged = gh.comments_of(REPO, PR)[0]
    assert actions.report(capsys, run_results()) == 1
    assert forged["body"] == "<!-- lk-eval:default -->\n## lk-eval: ✅ gate passed"
    ours = [c for c in mine(gh) if c["user"]["login"] == ACTIONS_BOT]  # type: ignore[index]
    assert len(ours) == 1 and "❌ gate failed" in str(ours[0]["body"])
    assert not [r for r in gh.requests if r.method == "PATCH"]
    # The next run edits its own comment, still not mallory's.
    gh.requests.clear()
    assert actions.report(capsys, passing()) == 0
    assert [r.method for r in gh.requests if r.method != "GET"] == ["PATCH"]
    assert gh.requests[-1].path.endswith(f"/comments/{ours[0]['id']}")
    assert "✅ gate passed" in str(ours[0]["body"]) and len(mine(gh)) == 2
    # GITHUB_TOKEN is an installation token (ghs_): github-actions[bot], nothing asked.
    assert not any(r.path == "/user" for r in gh.requests)
    assert warnings(capsys.readouterr().out) == []


def test_a_personal_token_owns_the_comments_of_its_user(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    gh = actions.gh
    gh.identities[PAT] = "octocat"
    gh.add_comments(REPO, PR, ["<!-- lk-eval:default -->\nby the bot"], ACTIONS_BOT)
    actions.report(capsys, passing(), "--github-token", PAT)
    actions.report(capsys, run_results(), "--github-token", PAT)
    by = {c["user"]["login"]: str(c["body"]) for c in mine(gh)}  # type: ignore[index]
    assert by[ACTIONS_BOT] == "<!-- lk-eval:default -->\nby the bot"
    assert "❌ gate failed" in by["octocat"] and len(mine(gh)) == 2


def test_comment_author_names_a_github_apps_bot(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    gh = actions.gh
    app_token = "ghs_token_of_an_app"
    gh.identities[app_token] = "eval-app[bot]"
    for results in (passing(), run_results()):
        actions.report(
            capsys, results, "--github-token", app_token, "--comment-author", "eval-app[bot]"
        )
    (comment,) = mine(gh)
    assert comment["user"]["login"] == "eval-app[bot]"  # type: ignore[index]
    assert "❌ gate failed" in str(comment["body"])
    assert not any(r.path == "/user" for r in gh.requests)  # told, not asked


UNKNOWN_FORM = "v1.0123456789abcdef0123456789abcdef01234567"  # no ghs_/ghp_ prefix


@pytest.mark.parametrize("answer", ["401", "403", "404", "500", "503"])
def test_a_personal_token_github_cannot_name_edits_nothing_and_posts_anew(
    actions: Actions, capsys: pytest.CaptureFixture[str], answer: str
) -> None:
    """Each answer of GET /user but 200 leaves a user's token unknown: the marker comments
    stay as they are, a new comment carries the verdict, a warning says why and what to do."""
    gh = actions.gh
    gh.identities[PAT] = "octocat"
    gh.add_comments(REPO, PR, ["<!-- lk-eval:default -->\nold"], "octocat")
    gh.add_comments(REPO, PR, ["<!-- lk-eval:default -->\nbot's"], ACTIONS_BOT)
    gh.fault, gh.fault_path = answer, "/user"
    assert actions.report(capsys, run_results(), "--github-token", PAT) == 1
    (warn,) = warnings(capsys.readouterr().out)
    assert f"cannot tell who the token posts as (GET /user: {answer}" in warn
    assert "--comment-author" in warn
    assert [r.method for r in gh.requests if r.method != "GET"] == ["POST"]
    bodies = [str(c["body"]) for c in mine(gh)]
    assert bodies[:2] == ["<!-- lk-eval:default -->\nold", "<!-- lk-eval:default -->\nbot's"]
    assert len(bodies) == 3 and "❌ gate failed" in bodies[2]


@pytest.mark.parametrize(
    ("answer", "edits"),
    [("403", True), ("401", False), ("404", False), ("500", False), ("503", False)],
)
def test_a_token_of_unknown_form_is_the_workflows_only_when_get_user_says_403(
    actions: Actions, capsys: pytest.CaptureFixture[str], answer: str, edits: bool
) -> None:
    """A token without a known prefix (an older or GitHub Enterprise one): 403 is what GitHub
    answers an installation token, so github-actions[bot]; anything else is unknown."""
    gh = actions.gh
    gh.identities[UNKNOWN_FORM] = ACTIONS_BOT
    gh.add_comments(REPO, PR, ["<!-- lk-eval:default -->\nold"], ACTIONS_BOT)
    gh.fault, gh.fault_path = answer, "/user"
    actions.report(capsys, passing(), "--github-token", UNKNOWN_FORM)
    sent = [r.method for r in gh.requests if r.method != "GET"]
    out = warnings(capsys.readouterr().out)
    if edits:
        assert sent == ["PATCH"] and out == [] and len(mine(gh)) == 1
    else:
        assert sent == ["POST"] and len(mine(gh)) == 2
        assert mine(gh)[0]["body"] == "<!-- lk-eval:default -->\nold"
        (warn,) = out
        assert f"(GET /user: {answer}" in warn


def test_the_workflows_token_is_never_asked_who_it_is(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    """GITHUB_TOKEN (ghs_) is github-actions[bot] whatever GET /user would answer."""
    gh = actions.gh
    gh.add_comments(REPO, PR, ["<!-- lk-eval:default -->\nold"], ACTIONS_BOT)
    gh.fault, gh.fault_path = "500", "/user"
    assert actions.report(capsys, passing()) == 0
    assert warnings(capsys.readouterr().out) == []
    assert [r.method for r in gh.requests if r.method != "GET"] == ["PATCH"]
    assert not any(r.path == "/user" for r in gh.requests)
    assert "✅ gate passed" in str(mine(gh)[0]["body"])


def test_token_kind_reads_the_prefix_only() -> None:
    assert token_kind("ghs_abc") == "installation"
    assert {token_kind(t) for t in ("ghp_a", "github_pat_a", "gho_a", "ghu_a")} == {"user"}
    assert token_kind(UNKNOWN_FORM) == "unknown" and token_kind(None) == "none"


def test_find_comment_asks_who_we_are_only_when_a_marker_is_there(
    actions: Actions,
) -> None:
    gh = actions.gh
    gh.add_comments(REPO, PR, ["no marker here"], ACTIONS_BOT)
    asked: list[str] = []

    def who() -> str:
        asked.append("asked")
        return ACTIONS_BOT

    with GitHubApi(gh.base_url, gh.token) as api:
        assert find_comment(api, REPO, PR, "default", who) is None and asked == []
        assert token_identity(api).login == ACTIONS_BOT  # GITHUB_TOKEN: ghs_
        gh.add_comments(REPO, PR, ["<!-- lk-eval:default -->\nmine"], ACTIONS_BOT)
        assert find_comment(api, REPO, PR, "default", who)["body"].endswith("mine")
        assert find_comment(api, REPO, PR, "default", "someone-else") is None


# --- what GitHub refused ---------------------------------------------------------------------


def test_422_says_githubs_reason_and_posts_the_compact_report(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    gh = actions.gh
    assert actions.report(capsys, passing()) == 0  # an earlier, passing verdict
    gh.max_body = 3000  # GitHub refuses what we measured as fitting (it counts differently)
    assert actions.report(capsys, big_failing_run()) == 1
    out = capsys.readouterr().out
    (warn,) = warnings(out)
    assert "422 Validation Failed: body is too long (maximum is 65536 characters)" in warn
    assert "posted the compact report" in warn
    (comment,) = mine(gh)
    body = str(comment["body"])
    assert "❌ gate failed" in body and len(body) <= 3000  # the old verdict is gone
    assert [r.method for r in gh.requests if r.method == "PATCH"] == ["PATCH", "PATCH"]
    assert actions.outputs()["comment-url"] == comment["html_url"]


def test_422_twice_is_a_warning_with_githubs_reason(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    actions.gh.max_body = 10
    assert actions.report(capsys, big_failing_run()) == 1
    (warn,) = warnings(capsys.readouterr().out)
    assert warn.startswith("::warning::lk-eval could not post the PR comment: POST ")
    assert "422 Validation Failed: body is too long (maximum is 65536 characters)" in warn
    assert [r.method for r in actions.gh.requests if r.method == "POST"] == ["POST", "POST"]


# --- heading and commit ----------------------------------------------------------------------


def test_each_comment_heading_names_its_comment_id_or_title(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    actions.report(capsys, passing())
    actions.report(capsys, passing(), "--comment-id", "voice")
    actions.report(capsys, passing(), "--comment-id", "chat", "--title", "Chat agent evals")
    headings = {
        cid: str(mine(actions.gh, cid)[0]["body"]).splitlines()[1]
        for cid in ("default", "voice", "chat")
    }
    why = " — all 2 scenarios passed"  # the first line says the verdict and why
    assert headings == {
        "default": "## lk-eval: ✅ gate passed" + why,
        "voice": "## lk-eval · voice: ✅ gate passed" + why,
        "chat": "## Chat agent evals: ✅ gate passed" + why,
    }
    assert "## Chat agent evals: ✅" in actions.summary.read_text(encoding="utf-8")


def test_comment_shows_the_pr_head_not_the_merge_commit(
    actions: Actions, capsys: pytest.CaptureFixture[str]
) -> None:
    merge = replace(passing().metadata, git_sha="merge999")  # what `git rev-parse HEAD` saw
    actions.report(capsys, replace(passing(), metadata=merge))
    body = str(mine(actions.gh)[0]["body"])
    assert "commit `abc123`" in body and "merge999" not in body
