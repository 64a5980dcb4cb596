"""GitHub integration: the Actions context, the REST calls (sticky comment), workflow commands.

Everything here is best effort by design: a failure to talk to GitHub is a warning, never a
change to the gate's verdict.
"""

from __future__ import annotations

from lkeval.publish.github.api import GitHubApi, GitHubError
from lkeval.publish.github.comments import (
    COMMENT_MODES,
    MAX_COMMENT_CHARS,
    CommentMode,
    CommentResult,
    comment_body,
    find_comment,
    marker,
    post_sticky_comment,
)
from lkeval.publish.github.context import GitHubContext, find_pull_request, read_context
from lkeval.publish.github.workflow import (
    MAX_ERROR_ANNOTATIONS,
    MAX_SUMMARY_BYTES,
    append_step_summary,
    error_annotations,
    format_outputs,
    group,
    write_outputs,
)
from lkeval.text.untrusted import add_mask_commands, command, escape_data, escape_property, warning

__all__ = [
    "COMMENT_MODES",
    "MAX_COMMENT_CHARS",
    "MAX_ERROR_ANNOTATIONS",
    "MAX_SUMMARY_BYTES",
    "CommentMode",
    "CommentResult",
    "GitHubApi",
    "GitHubContext",
    "GitHubError",
    "add_mask_commands",
    "append_step_summary",
    "command",
    "comment_body",
    "error_annotations",
    "escape_data",
    "escape_property",
    "find_comment",
    "find_pull_request",
    "format_outputs",
    "group",
    "marker",
    "post_sticky_comment",
    "read_context",
    "warning",
    "write_outputs",
]
