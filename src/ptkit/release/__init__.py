"""Build-side tools: variant recipes, the version provider, and audits of built libraries."""
