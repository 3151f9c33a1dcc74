# Ruyi: a context-rewriting proxy for LLM agents.
# Build: docker build -t ruyi .    Run: docker run -p 8787:8787 -e RUYI_UPSTREAM=http://ollama:11434 ruyi

FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY strategies ./strategies
COPY conversation ./conversation
COPY config ./config
COPY memory ./memory
COPY summaries ./summaries
COPY redaction ./redaction
RUN pip install --no-cache-dir uv \
    && uv venv /opt/ruyi \
    && UV_COMPILE_BYTECODE=1 uv pip install --no-cache --python /opt/ruyi/bin/python .

FROM python:3.11-slim AS runtime
RUN useradd --create-home --uid 10001 ruyi && mkdir /data && chown ruyi /data
COPY --from=build /opt/ruyi /opt/ruyi
ENV PATH="/opt/ruyi/bin:$PATH" \
    PYTHONUNBUFFERED=1 \
    RUYI_UPSTREAM=http://ollama:11434 \
    RUYI_DATA_DIR=/data
USER ruyi
WORKDIR /home/ruyi
VOLUME ["/data"]
EXPOSE 8787
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8787/healthz', timeout=2)"]
ENTRYPOINT ["ruyi", "serve", "--host", "0.0.0.0"]
