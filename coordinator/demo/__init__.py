"""`astra demo`: a coordinator and fake GPU machines on loopback, with runs that show placement."""
