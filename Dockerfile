# lk-eval: the GitHub Action's container, and lkeval with its dependencies for any CI or laptop.
#
#   docker build -t lk-eval .
#   docker run --rm -v "$PWD:/src" -w /src -e OPENAI_API_KEY lk-eval \
#       run --agent agent.py --scenarios scenarios.yaml
#
# The base is pinned by digest, so the action builds the same image on every run until the pin
# is moved on purpose. To move it (for security fixes; do it with each release):
#   docker buildx imagetools inspect python:3.11-slim     (the "Digest:" line), or
#   docker pull python:3.11-slim && docker inspect --format '{{index .RepoDigests 0}}' python:3.11-slim
# then replace the sha256 below and run `make test` (tests/test_dockerfile.py replays the
# install steps; a real `docker build .` checks the rest).
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# The version is checked against lkeval.__version__ by tests/test_action.py.
LABEL org.opencontainers.image.title="lk-eval" \
      org.opencontainers.image.description="Scenario evals for LiveKit agents in CI" \
      org.opencontainers.image.version="0.1.0" \
      org.opencontainers.image.licenses="Apache-2.0"

ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# git: the results record the commit evaluated (git rev-parse HEAD). Actions mounts a workspace
# owned by the runner's user while the container runs as root, and git refuses such a
# repository ("dubious ownership") unless it is marked safe. git is not pinned (DL3008): the
# digest above fixes Debian's release, and a pinned Debian revision fails once it is replaced.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*'

# Dependencies first (the slow layer: livekit-agents and its wheels), from pyproject.toml and a
# stub package, so a change to lk-eval's source reuses this layer. uv installs the agent's
# locked dependencies when its repository has a uv.lock (install: auto).
COPY pyproject.toml README.md /app/
RUN mkdir -p /app/lkeval \
    && printf '__version__ = "0"\n' > /app/lkeval/__init__.py \
    && pip install --no-cache-dir /app uv==0.13.9 \
    && rm -rf /app/lkeval /app/build /app/lk_eval.egg-info

COPY lkeval /app/lkeval
RUN pip install --no-cache-dir --no-deps /app \
    && rm -rf /app/lkeval /app/build /app/lk_eval.egg-info
COPY entrypoint.py /app/entrypoint.py

# No USER and no WORKDIR: Actions runs the container as root in the mounted workspace
# (--workdir /github/workspace), and `docker run -w /src` does the same locally.
ENTRYPOINT ["python", "/app/entrypoint.py"]
