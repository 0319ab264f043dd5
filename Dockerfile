# syntax=docker/dockerfile:1
# capplan image: CPU TensorFlow on slim Python 3.11, non-root, `capplan` as the entrypoint.
# Build:  docker build -t capplan:0.1.0 .
# Run:    docker run --rm capplan:0.1.0 plan --help
#
# Stage 1 (build) compiles nothing of its own, but some wheels (cmdstanpy's CmdStan for Prophet)
# may need a compiler; it builds one wheelhouse from requirements.lock. Stage 2 (runtime) installs
# only those wheels into a virtualenv, so no compiler, pip cache or source tree reaches the final layer.

FROM python:3.11-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml requirements.lock README.md ./
COPY capplan ./capplan
COPY forecasting ./forecasting
COPY optimizer ./optimizer
COPY dashboards ./dashboards
COPY airflow_dags ./airflow_dags
COPY data/sample ./data/sample
COPY schemas ./schemas
RUN python -m venv /opt/capplan \
 && /opt/capplan/bin/pip install --upgrade "pip>=24,<27" \
 && /opt/capplan/bin/pip install -c requirements.lock . \
 && /opt/capplan/bin/capplan --version

FROM python:3.11-slim-bookworm AS runtime
LABEL org.opencontainers.image.title="capplan" \
      org.opencontainers.image.description="Forecasting and capacity planning for GPU clusters" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/capplan/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 \
    TF_CPP_MIN_LOG_LEVEL=2 CAPPLAN_HOME=/var/lib/capplan
RUN groupadd --system --gid 10001 capplan \
 && useradd --system --uid 10001 --gid capplan --home-dir /var/lib/capplan --create-home --shell /usr/sbin/nologin capplan
COPY --from=build /opt/capplan /opt/capplan
USER 10001:10001
WORKDIR /var/lib/capplan
EXPOSE 9464
ENTRYPOINT ["capplan"]
CMD ["--help"]
