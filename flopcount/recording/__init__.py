"""What the eager view and the graph view share: recording dispatched ops (``recorder``) and
capturing them as a Graph (``capture``), the rows of a graph (``rows``), the parameter index
(``params``), memory prediction from recorded ops (``memory``) and the training step
(``steps``). It sits under both views and above the conventions and the report."""
