"""The agents: Planner, Coder(s), Verifier and the loop that runs them."""
