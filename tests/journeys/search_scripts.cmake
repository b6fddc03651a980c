# Journey (issue 51): search in every language on a small corpus with
# such names, over HTTP as curl and a browser's form send it; hostile
# queries answered 400 (saying why) or 200, never 500.
add_test(NAME journey_search_scripts
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/search_scripts.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events> --out ${JOURNEY_OUT}/search_scripts)
set_tests_properties(journey_search_scripts PROPERTIES LABELS journey TIMEOUT 120)
