# syntax=docker/dockerfile:1
# bind-audit: the API and the worker share this image; compose picks the command.
#   docker build -t bind-audit .                          # CPU torch (default)
#   docker build -t bind-audit:cuda --build-arg TORCH_VARIANT=cuda .
FROM python:3.11-slim AS base

ARG TORCH_VARIANT=cpu
ARG TORCH_VERSION=2.13.0
# cuda: the CUDA 12.8 wheels; override TORCH_CUDA_INDEX for another toolkit.
ARG TORCH_CUDA_INDEX=https://download.pytorch.org/whl/cu128

# glibc.malloc.hugetlb=1: tensors above glibc's 32 MiB mmap threshold come from fresh mappings on every allocation;
# with transparent huge pages (kernel setting "madvise") they fault in 2 MiB at a time instead of 4 KiB (docs/SCALE.md,
# "Where the 10^6-node CPU time went": a third less kernel time; a no-op where THP is off).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    GLIBC_TUNABLES=glibc.malloc.hugetlb=1

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
