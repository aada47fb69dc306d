"""The web crawler (step 6): a polite crawler that feeds pages through the same pipeline. Not built yet."""
