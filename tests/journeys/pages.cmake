# Pages for people (issue 51): headless Chromium at 360 and 1280 px over a
# node's pages and its static site: no sideways scrolling, the mirror's
# name and a search box in every header, an HTML error page, citation
# tags and BibTeX, every record page link answering. Skipped (77) without
# Chromium; screenshots in JOURNEY_OUT.
add_test(NAME journey_pages
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/pages.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events> --out ${JOURNEY_OUT})
set_tests_properties(journey_pages PROPERTIES LABELS journey TIMEOUT 300 SKIP_RETURN_CODE 77)
