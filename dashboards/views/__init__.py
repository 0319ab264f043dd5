"""Page scripts of the dashboard (run by ``st.navigation``; not imported)."""
