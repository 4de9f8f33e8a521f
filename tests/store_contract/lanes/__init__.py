"""The lanes port (``LaneStore``): inbox seqs, epochs, lifecycle calls, turn commits, chat."""
