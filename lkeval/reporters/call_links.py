"""Links to an audio attempt's call (its stereo WAV and SVG timeline) from a Markdown report.

Where a reader can follow a link depends on where the Markdown is read:

* the Markdown file (``--markdown PATH``) sits beside the run's files, so each file is linked
  relative to the report's own folder (:attr:`Report.files_from`);
* a PR comment or a job summary lives on GitHub, which cannot link a file on the runner: each
  file links to the run's artifacts page (:attr:`Report.artifacts_url`, built from validated
  environment values only) and is named by its path inside the uploaded results folder
  (:attr:`Report.artifacts_root`), which is where the recipes upload the logs and calls;
* anywhere else the files are only named.

The paths come from a results file, which another run (a PR's) may have written: a link target
is percent-encoded (no scheme, no parenthesis, no space can leave it) and the text shown is
made inert like every other untrusted string.
"""

from __future__ import annotations

import os
import posixpath
from urllib.parse import quote

from lkeval.reporters.interface import Report
from lkeval.results.model import AudioCallRecord
from lkeval.text.untrusted import md_text

#: Characters a link target keeps as they are; everything else is percent-encoded.
_SAFE_IN_LINK = "/-._~"
#: Longest path shown as a link's text.
_PATH_CHARS = 300


def call_files(call: AudioCallRecord | None) -> list[str]:
    """The call's files that were written (the WAV, then the SVG)."""
    if call is None:
        return []
    return [path for path in (call.recording, call.timeline) if path]


def call_links(call: AudioCallRecord | None, report: Report | None) -> str:
    """``[<code>WAV</code>](target) · [<code>SVG</code>](target)`` as ``report`` can link them
    (None: only named; "" when the attempt left no files)."""
    return " · ".join(_link(path, report) for path in call_files(call))


def _link(path: str, report: Report | None) -> str:
    if report is None:
        return f"<code>{_shown(path)}</code>"
    if report.files_from is not None:
        target = _relative(path, report.files_from)
        return f"[<code>{_shown(target)}</code>]({quote(target, safe=_SAFE_IN_LINK)})"
    if report.artifacts_url is not None:
        inside = artifact_path(path, report.artifacts_root)
        return f"[<code>{_shown(inside)}</code>]({report.artifacts_url})"
    return f"<code>{_shown(path)}</code>"


def artifact_path(path: str, root: str | None) -> str:
    """Where ``path`` is inside the uploaded results folder ``root`` (the path as recorded
    when there is no root or the file lies outside it)."""
    if root is None:
        return path
    inside = _relative(path, root)
    return path if inside.startswith("../") or inside == ".." else inside


def _relative(path: str, start: str) -> str:
    """``path`` relative to the folder ``start``, with ``/`` separators (both as recorded: the
    run that wrote them had one working directory)."""
    try:
        relative = os.path.relpath(path, start or ".")
    except ValueError:  # another drive (Windows): no relative path exists
        relative = path
    return posixpath.join(*relative.split(os.sep)) if relative else relative


def _shown(path: str) -> str:
    return md_text(" ".join(path.split()), _PATH_CHARS)
