# Journey (issue 51): see the docstring of wget_mirror.py.
add_test(NAME journey_wget_mirror
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/wget_mirror.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events> --out ${JOURNEY_OUT}/wget_mirror)
set_tests_properties(journey_wget_mirror PROPERTIES LABELS journey TIMEOUT 300 SKIP_RETURN_CODE 77)
