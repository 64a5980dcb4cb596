# lk-eval: the GitHub Action's container, and lkeval with its dependencies for any CI or laptop.
#
#   docker build -t lk-eval .
#   docker run --rm -v "$PWD:/src" -w /src -e OPENAI_API_KEY lk-eval \
#       run --agent agent.py --scenarios scenarios.yaml
#
# The Action does not build this file: .github/workflows/release.yml builds it once per
# release, tests the image, pushes it to ghcr.io and pins action.yml to its digest.
#
# Nothing resolves while building: the Python dependencies are exactly the hashed pins of
# requirements/image.lock (`make lock` refreshes it from pyproject.toml), installed with
# --require-hashes --no-deps, and `pip check` proves the pins complete. The base is pinned by
# digest too. To move it (for security fixes; do it with each release):
#   docker buildx imagetools inspect python:3.11-slim     (the "Digest:" line)
# then replace the sha256 below and run `make test` and `make image-check`.
FROM python:3.11-slim@sha256:9c900dea9e8fb7e16277c179b555cc72d29a352dbc33cff48ad5a0412fd5bfc7

# No .pyc files: the agent's would be written into the runner user's checkout, owned by root.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# espeak-ng speaks the simulated caller's lines in audio mode (`--mode audio`, the default voice)
# and the local speech server's agent replies (`--speech local`). The Debian release is fixed by
# the base image's digest; within it apt serves only security updates, so the version is not
# pinned (a pin would break the build at the first such update).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends espeak-ng \
    && rm -rf /var/lib/apt/lists/*

# The dependencies alone (the slow, large layer): it is rebuilt only when the lock changes.
COPY requirements/image.lock /app/requirements/image.lock
RUN pip install --no-cache-dir --require-hashes --no-deps -r /app/requirements/image.lock \
    && pip check

# lk-eval itself, built with the locked setuptools (no build isolation, so nothing is fetched)
# in a scratch copy that is removed again.
COPY pyproject.toml README.md /tmp/lk-eval/
COPY lkeval /tmp/lk-eval/lkeval
RUN pip install --no-cache-dir --no-deps --no-build-isolation /tmp/lk-eval \
    && rm -rf /tmp/lk-eval \
    && pip check
COPY entrypoint.py /app/entrypoint.py
COPY lkeval_action /app/lkeval_action

# Last, so a new revision reuses every layer above. release.yml passes all three; the
# version's default is checked against lkeval.__version__ by tests/action/test_action.py.
ARG VERSION=1.0.0
ARG REVISION=unknown
ARG SOURCE=https://github.com/org/lk-eval
LABEL org.opencontainers.image.title="lk-eval" \
      org.opencontainers.image.description="Scenario evals for LiveKit agents in CI" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"

# No USER and no WORKDIR: Actions runs the container as root in the mounted workspace
# (--workdir /github/workspace), and `docker run -w /src` does the same locally. The
# entrypoint hands what it wrote back to the workspace's owner.
ENTRYPOINT ["python", "/app/entrypoint.py"]
