# Journey (issue 51): pithctl --store search while a node runs answers
# from the node's index, read-only, and the node's search still answers
# (and survives its index being deleted under it).
add_test(NAME journey_search_beside_node
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/search_beside_node.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events>)
set_tests_properties(journey_search_beside_node PROPERTIES LABELS journey TIMEOUT 120)
