"""Text as people type it, in the five languages the product speaks (en, it, fr, de, es).

The lowest layer beside apps.core: sentences, clauses, words, lemmas, the language of a
message, the lexicons that tell a name, a place or a job from an ordinary word, and the facts a
user's sentence states about them (apps.language.facts). It imports nothing of the apps.
"""
