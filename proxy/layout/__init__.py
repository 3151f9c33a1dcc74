"""The layout (seed 003's sections): what Ruyi adds to a request's system part and to its newest input; imports know, longctx, keep, memory and summaries, never rewrite, replay, api or http."""
