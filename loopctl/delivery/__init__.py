"""What happens to finished work: the approval gate, then commit, push and pull request."""
