"""Each language's constructions and cues, as data for the one engine (..engine)."""
