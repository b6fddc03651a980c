# Journey (issue 53): an operator caps reconciliation's answers to all
# peers with sync_upload_bytes in the config file; two fresh nodes still
# get everything (deferred, not refused), and `pithctl status` says what
# was sent, the budget and the deferrals.
add_test(NAME journey_recon_budget
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/recon_budget.py
          --pithd $<TARGET_FILE:pithd> --pithctl $<TARGET_FILE:pithctl>
          --gen-events $<TARGET_FILE:gen_events>)
set_tests_properties(journey_recon_budget PROPERTIES LABELS journey TIMEOUT 180)
