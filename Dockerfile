FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY apps ./apps
COPY thalamus_site ./thalamus_site
COPY llm_stub ./llm_stub
RUN pip install .
COPY . .
RUN python manage.py collectstatic --noinput
RUN useradd --create-home thalamus && mkdir -p /app/var && chown thalamus /app/var
USER thalamus
EXPOSE 8000
