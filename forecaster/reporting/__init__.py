"""Rendering results that were computed elsewhere: the report folder (CSV, JSON, PNG, HTML),
figures, and the comparison of several report folders. Nothing here fits or scores a model."""
