"""The Berkeley Function Calling Leaderboard (BFCL): its data and a reimplementation of its AST checker."""
