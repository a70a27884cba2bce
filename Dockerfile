# syntax=docker/dockerfile:1
# bind-audit: the API and the worker share this image; compose picks the command.
#   docker build -t bind-audit .                          # CPU torch (default)
#   docker build -t bind-audit:cuda --build-arg TORCH_VARIANT=cuda .
FROM python:3.11-slim AS base

ARG TORCH_VARIANT=cpu
ARG TORCH_VERSION=2.13.0
# cuda: the CUDA 12.8 wheels; override TORCH_CUDA_INDEX for another toolkit.
ARG TORCH_CUDA_INDEX=https://download.pytorch.org/whl/cu128

# GLIBC_TUNABLES: float64 activations of hundreds of megabytes are allocated on every pass of a large audit; above
# glibc's default mmap threshold each is a fresh mapping faulted in 4 KiB at a time. These thresholds keep them on the
# heap for reuse (app/core/allocator.py, which the CLI applies by itself elsewhere; docs/SCALE.md: one polish
# evaluation of the 10^6-node SAGE 2.65 s -> 1.51 s). Set GLIBC_TUNABLES empty to opt out.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=4294967296:glibc.malloc.trim_threshold=68719476736

RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin bind

WORKDIR /srv/bind-audit

# torch first, in its own layer: it is by far the largest and changes least often.
RUN case "$TORCH_VARIANT" in \
      cpu)  pip install "torch==${TORCH_VERSION}" --index-url https://download.pytorch.org/whl/cpu ;; \
      cuda) pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_CUDA_INDEX}" ;; \
      *) echo "TORCH_VARIANT must be cpu or cuda, got '$TORCH_VARIANT'" >&2; exit 1 ;; \
    esac

COPY pyproject.toml README.md ./
COPY bind_core ./bind_core
COPY app ./app
COPY worker ./worker
COPY migrations ./migrations
COPY alembic.ini ./
# Editable, so that app.core.db.migrate finds alembic.ini and migrations/ beside the code.
RUN pip install -e . && mkdir -p /srv/bind-audit/var /data && chown -R bind:bind /srv/bind-audit/var /data

USER bind
ENV BIND_DATA_ROOT=/data
EXPOSE 8000

CMD ["uvicorn", "app.main:create_app", "--factory", "--host", "0.0.0.0", "--port", "8000"]
