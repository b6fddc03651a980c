# Journey (issue 51): see the docstring of openmetrics.py.
add_test(NAME journey_openmetrics
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/openmetrics.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events> --out ${JOURNEY_OUT}/openmetrics)
set_tests_properties(journey_openmetrics PROPERTIES LABELS journey TIMEOUT 300 SKIP_RETURN_CODE 77)
