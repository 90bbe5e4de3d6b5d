from __future__ import annotations

from django.contrib.postgres.operations import BtreeGinExtension, TrigramExtension
from django.db import migrations
from pgvector.django import VectorExtension


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []
    operations = [VectorExtension(), BtreeGinExtension(), TrigramExtension()]
