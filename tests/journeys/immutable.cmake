# Journey (issue 55): see the docstring of immutable.py.
add_test(NAME journey_immutable
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/immutable.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events>)
set_tests_properties(journey_immutable PROPERTIES LABELS journey TIMEOUT 120 SKIP_RETURN_CODE 77)
