# src/engine: owned by that component; appends to the variables in Makefile.am.
