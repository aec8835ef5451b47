"""The language server (pygls). Imported only by `stitchcuda serve`."""
