# Journey (issue 55): see the docstring of cache_reader.py.
add_test(NAME journey_cache_reader
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/cache_reader.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events>
          --conf ${PROJECT_SOURCE_DIR}/deploy/nginx-cache.conf
          --purge ${PROJECT_SOURCE_DIR}/deploy/pith-cache-purge)
set_tests_properties(journey_cache_reader PROPERTIES LABELS journey TIMEOUT 120 SKIP_RETURN_CODE 77)
