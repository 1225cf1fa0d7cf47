"""Tool use: agents split the function calls that answer a request (BFCL style)."""
