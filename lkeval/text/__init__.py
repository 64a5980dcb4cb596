"""Text safety, for every layer: secrets masked, untrusted text made inert, lengths bounded.

Whatever lk-eval prints, writes or posts may carry a secret (an agent echoing its key) or text
someone else chose (a scenario label from a PR, a transcript, an LLM's reason, a results file
from a fork). The rules for both live here, below every other layer, so the layer that shows a
text applies them where it shows it and none has to reach up (or sideways) for them:

* ``masking``: the process's one :class:`~lkeval.text.masking.Masker` and ``clip``
  (mask first, then cut);
* ``untrusted``: text for a terminal line, Markdown, a table cell or a code block, and GitHub
  workflow commands, with untrusted lines the runner cannot read as one.

Standard library only: the Action's entrypoint imports it before anything is installed.
"""
