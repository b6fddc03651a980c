# Journey (issue 56): see the docstring of http_loops.py.
add_test(NAME journey_http_loops
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/http_loops.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events>)
set_tests_properties(journey_http_loops PROPERTIES LABELS journey TIMEOUT 180)
