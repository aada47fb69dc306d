"""From files and crawled pages to the index: scanning, watching, ignore rules, change coalescing and the
indexer that brings the index in line with the folders.

A regular package, not an implicit namespace one: setuptools' default editable install cannot import a
namespace subpackage mapped with package-dir from outside its parent's folder (pypa/setuptools#4943),
so ``pip install -e .`` would fail on ``import deskdex.pipeline`` (tests/test_installed.py checks it).
"""
