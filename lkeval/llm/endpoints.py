"""Where an LLM is served: the endpoints lk-eval knows, a base URL's problems, keys by host.

Part of resolving the caller's and judge's LLM (:mod:`lkeval.llm.config`), apart from it
because none of it depends on the role's flags or model: which URL LiveKit Inference has, what
makes a base URL unusable, which hosts may run without a key (a self-hosted server), and which
variables may hold the key for a host. Standard library only, like the config: it runs before
any agent boots.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import urlsplit

LIVEKIT_INFERENCE_DEFAULT_URL = "https://agent-gateway.livekit.cloud/v1"
LIVEKIT_INFERENCE_STAGING_URL = "https://agent-gateway.staging.livekit.cloud/v1"
OPENAI_DEFAULT_URL = "https://api.openai.com/v1"
# Values of --<role>-base-url that select LiveKit Inference even when OPENAI_BASE_URL is set
# (it often is, for the agent under test).
INFERENCE_BASE_URL_ALIASES = ("livekit", "inference")

# Provider-specific key variables tried after LKEVAL_<ROLE>_API_KEY and before OPENAI_API_KEY,
# so a team that already exports GROQ_API_KEY for its agent needs no extra secret.
_PROVIDER_KEY_ENV = (
    (".openai.azure.com", "AZURE_OPENAI_API_KEY"),
    (".cognitiveservices.azure.com", "AZURE_OPENAI_API_KEY"),
    (".services.ai.azure.com", "AZURE_OPENAI_API_KEY"),
    ("api.groq.com", "GROQ_API_KEY"),
    ("openrouter.ai", "OPENROUTER_API_KEY"),
)


def env_value(environ: Mapping[str, str], name: str) -> str | None:
    """The variable's value, or None when it is unset or blank (a blank names nothing)."""
    value = environ.get(name, "").strip()
    return value or None


def inference_credentials(environ: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The names of the variables holding the LiveKit Inference key and secret (None: unset)."""
    # The same precedence as livekit.agents.inference: the inference-specific pair first.
    key = next(
        (n for n in ("LIVEKIT_INFERENCE_API_KEY", "LIVEKIT_API_KEY") if env_value(environ, n)), None
    )
    secret = next(
        (
            n
            for n in ("LIVEKIT_INFERENCE_API_SECRET", "LIVEKIT_API_SECRET")
            if env_value(environ, n)
        ),
        None,
    )
    return key, secret


def inference_url(environ: Mapping[str, str]) -> str:
    """The LiveKit Inference gateway's URL."""
    # Mirrors livekit.agents.inference's default, so the spec names the host really called.
    if url := env_value(environ, "LIVEKIT_INFERENCE_URL"):
        return url
    if ".staging.livekit.cloud" in environ.get("LIVEKIT_URL", ""):
        return LIVEKIT_INFERENCE_STAGING_URL
    return LIVEKIT_INFERENCE_DEFAULT_URL


def url_problem(url: str) -> str:
    """What is wrong with a base URL, or "" when nothing is."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return "the scheme must be http or https"
    if any(c.isspace() for c in url):
        return "it contains whitespace"
    if not parts.hostname:
        return "no host"
    hostport = parts.netloc.rpartition("@")[2]
    if hostport.endswith(":"):
        return "an empty port"
    try:
        port = parts.port
    except ValueError:
        return "the port is not a number from 1 to 65535"
    if port == 0:
        return "port 0"
    return ""


def key_envs(role: str, base_url: str) -> list[str]:
    """The variables that may hold the key of ``role`` for this server, in the order tried."""
    host = (urlsplit(base_url).hostname or "").lower()
    names = [f"LKEVAL_{role.upper()}_API_KEY"]
    names += [env for suffix, env in _PROVIDER_KEY_ENV if host.endswith(suffix)]
    names.append("OPENAI_API_KEY")
    return names


def wants_inference(base: str | None) -> bool:
    """A base URL of ``livekit``/``inference``: LiveKit Inference asked for by name."""
    return bool(base and base.strip().lower() in INFERENCE_BASE_URL_ALIASES)


def is_local_host(host: str) -> bool:
    """Loopback, private and single-label hosts (``ollama`` in Docker) may run without a key."""
    host = host.lower()
    if host in ("localhost",) or host.endswith((".local", ".internal", ".localhost")):
        return True
    if "." not in host and ":" not in host:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local
