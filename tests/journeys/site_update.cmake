# Journey (issue 55): see the docstring of site_update.py.
add_test(NAME journey_site_update
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/site_update.py
          --pithctl $<TARGET_FILE:pithctl> --gen-events $<TARGET_FILE:gen_events>)
set_tests_properties(journey_site_update PROPERTIES LABELS journey TIMEOUT 120 SKIP_RETURN_CODE 77)
